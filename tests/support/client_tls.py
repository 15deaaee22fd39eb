"""The TLS context the tests' own HTTP clients and transports share (``verify=TLS``): httpx's stock one, made once.

Each client or transport made without it builds its own and loads the whole CA bundle into it, tens of milliseconds
of CPU; the suite makes hundreds, and the loopback and respx upstreams they talk to never use TLS.
"""

import httpx

TLS = httpx.create_ssl_context()
