"""The loopback HTTP kit: the rules every metaeval HTTP server (gateway, PACT, viewer) keeps,
each written once.

- `access`: who may talk to a server (its own loopback ``Host``, no web page, a token);
- `framing`: reading a request off the wire within bounds of time and size;
- `server`: the threaded listener and the handler base that applies those bounds.
"""
