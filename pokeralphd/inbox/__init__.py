"""The human inbox: deliveries that need (or are shown to) a person, with typed answers."""
