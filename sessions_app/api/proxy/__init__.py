"""The Anthropic- and OpenAI-compatible proxy's interface: ``views`` forwards (a step per service:
the session, what goes upstream, the recording), speaking each API as ``dialects`` says; ``body``
reads a request, ``limits`` bounds what recording costs, ``headers`` relays what may pass,
``stream`` reads an answer on its way through, ``recorder`` records each exchange once its answer is
out, ``base`` answers a client's probe of the base URL. What is stored: ``services.proxy``."""
