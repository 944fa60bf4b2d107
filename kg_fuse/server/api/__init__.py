"""The HTTP API: the app factory, the routes, request dependencies and schemas, sign-in,
and the limits on requests. It talks to the knowledge graph and reads through storage."""
