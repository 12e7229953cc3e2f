"""Request handlers, one module per API family: `async def handle_x(ctx, request)` takes the
`RequestContext` (broker/context.py) and the decoded kio request, and returns the response as a
version-agnostic dict (protocol/codec.py builds the version asked for). Each handler carries its
declaration, `@api(key, name, versions)` (declare.py), and its module's header names the APIs
with their keys; broker/apis.py collects the declarations into the dispatch table."""
