"""The sample repository the quickstart demo battles over (``demo/sample``)."""
