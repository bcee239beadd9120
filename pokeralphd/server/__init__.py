"""The socket side: listener, peer check, connections, dispatch, method handlers, event bus."""
