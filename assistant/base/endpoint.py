"""A teacher endpoint as a setting: "local", or an http(s) base URL with no secret in it."""

from __future__ import annotations

import re

from assistant.base.errors import ConfigError

# Query parameters that carry a secret (api-key, apiKey, access_token, Azure Functions'
# code, a signature).
_SECRET_PARAM = re.compile(r"(?i)key|token|secret|sig|passw|auth|code|credential")


def check_endpoint(url: str, where: str) -> str:
    """``teacher.endpoint``: "local" or an http(s) base URL with no secret in it (the
    endpoint is written to the audit ledger, the logs and error lines; the key has a
    place of its own).  An error never repeats the URL: it may hold the secret."""
    if url == "local":
        return url
    from urllib.parse import unquote_plus, urlsplit

    shape = f'{where}: not "local" or an http(s) base URL such as http://127.0.0.1:8080/v1'
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ConfigError(shape) from None
    # A name as the server reads it: "%6Bey" is "key".
    names = [unquote_plus(p.split("=", 1)[0]) for p in re.split(r"[&;]", parts.query) if p]
    if "@" in parts.netloc or parts.fragment or any(_SECRET_PARAM.search(n) for n in names):
        raise ConfigError(
            f"{where}: the URL holds a user name, a password, a fragment or a key-like "
            "parameter, and the endpoint is written to the audit ledger: give the key "
            "with `drag config set-key` or DRAG_TEACHER_API_KEY instead"
        )
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(shape) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise ConfigError(shape)
    return url
