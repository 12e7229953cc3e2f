"""Request handlers, one module per API family: `async def handle_x(ctx, request)` takes the
`RequestContext` (broker/context.py) and the decoded kio request, and returns the response as a
version-agnostic dict (protocol/codec.py builds the version asked for). broker/apis.py is the
dispatch table that maps api keys and versions to them."""
