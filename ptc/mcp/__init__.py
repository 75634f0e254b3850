"""MCP both ways, on the official ``mcp`` SDK (extra ``ptc[mcp]``); DESIGN section 9.

```python
from ptc import mcp as ptc_mcp
git = await ptc_mcp.mount(scope, ptc_mcp.stdio("mcp-server-git", "--repository", repo),
                          prefix="git_")
web = await ptc_mcp.mount(scope, ptc_mcp.http("http://127.0.0.1:8000/mcp"), timeout_seconds=30)
git.names                       # the registered names; await git.aclose() unregisters, disconnects
server = ptc_mcp.server(scope)  # an mcp.server.lowlevel.Server serving that scope
await ptc_mcp.serve(scope)      # stdio; or serve(scope, "streamable-http", host=..., port=...)
```

Exceptions: :class:`MountError` (``ptc.PtcError``, ``ConnectionError``) when a server cannot
be started, reached or listed; ``ValueError`` s (``ptc.SchemaError``, ``ptc.ScopeError``)
for a schema ptc cannot accept or a name that clashes. Calls never raise: a server's
``isError`` is ``TOOL_ERROR``, a closed or unreachable server ``TOOL_UNAVAILABLE``.
Importing ``ptc`` never imports this module.
"""

from ._convert import BadSchemaPolicy as BadSchemaPolicy
from ._http_auth import BearerToken as BearerToken
from ._listen import Transport as Transport
from ._listen import serve as serve
from ._mount import Mount as Mount
from ._mount import mount as mount
from ._serve import server as server
from ._servers import HttpServer as HttpServer
from ._servers import MountError as MountError
from ._servers import StdioServer as StdioServer
from ._servers import http as http
from ._servers import stdio as stdio

__all__ = (
    "BadSchemaPolicy",
    "BearerToken",
    "HttpServer",
    "Mount",
    "MountError",
    "StdioServer",
    "Transport",
    "http",
    "mount",
    "serve",
    "server",
    "stdio",
)
