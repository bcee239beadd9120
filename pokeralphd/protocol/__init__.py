"""The wire: JSON-RPC 2.0 envelopes, framing, error codes, method and event types."""
