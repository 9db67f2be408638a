"""`coevo serve`: an OpenAI-compatible endpoint over a local checkpoint (FastAPI + uvicorn).

    protocol.py  the request bodies (pydantic) and the response bodies (OpenAI / vLLM field names)
    engine.py    dynamic batching: concurrent requests share one `Policy.generate` call
    sessions.py  `/sessions/{id}/v1`: every call of an episode recorded token in, token out, as Trajectories
    app.py       the routes and the bearer check
    stream.py    server-sent events in the OpenAI streaming shape
    errors.py    OpenAI-style error bodies with their status codes
    server.py    a uvicorn server in a thread (tests, benchmarks, native agents run in-process)
    cli.py       the `coevo serve` command

Nothing heavy is imported here; fastapi, uvicorn and torch load when a server is built.
"""
