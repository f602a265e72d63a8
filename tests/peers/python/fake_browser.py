"""Switchboard test helper: a stand-in for a web browser, used as `$BROWSER`.

    python fake_browser.py URL

GETs URL and follows redirects (the authorization server's 302 to the loopback
callback), like a browser whose user approves at once. Environment:
    FAKE_BROWSER_STATE   replace the `state` parameter of the callback with this value
                         (to test a forged or stale callback)
    FAKE_BROWSER_LOG     append the final URL's path and the HTTP status to this file
"""

import os
import sys
import urllib.error
import urllib.parse
import urllib.request


class Redirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        forged = os.environ.get("FAKE_BROWSER_STATE")
        if forged is not None and "code=" in newurl:
            parts = urllib.parse.urlsplit(newurl)
            query = [
                (k, forged if k == "state" else v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
            ]
            newurl = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def main() -> int:
    url = sys.argv[1]
    opener = urllib.request.build_opener(Redirects)
    status = 0
    final = url
    try:
        with opener.open(url, timeout=30) as resp:
            status = resp.status
            final = resp.geturl()
    except urllib.error.HTTPError as e:
        status = e.code
        final = e.geturl()
    except Exception as e:  # noqa: BLE001 - report anything
        sys.stderr.write(f"fake_browser: {e}\n")
        status = -1
    log = os.environ.get("FAKE_BROWSER_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{urllib.parse.urlsplit(final).path} {status}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
