"""CI: the server `make run` started answers as the README promises — demo / demo signs in and sees
the demo project's sessions. Standard library only (runs before and outside the project's venv)."""

from __future__ import annotations

import http.cookiejar
import re
import sys
import urllib.parse
import urllib.request

base = sys.argv[1].rstrip("/")
jar = http.cookiejar.CookieJar()
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
login = opener.open(f"{base}/accounts/login/", timeout=30).read().decode()
token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login)
if not token:
    sys.exit("the sign-in page has no CSRF token")
form = urllib.parse.urlencode({"username": "demo", "password": "demo", "csrfmiddlewaretoken": token.group(1)})
request = urllib.request.Request(f"{base}/accounts/login/", data=form.encode(), headers={"Referer": f"{base}/"})
page = opener.open(request, timeout=30)
if "/accounts/login/" in page.geturl():
    sys.exit(f"demo / demo did not sign in (ended on {page.geturl()})")
projects = opener.open(f"{base}/projects/", timeout=30).read().decode()
if "demo" not in projects.lower():
    sys.exit("the demo project is not listed after signing in")
print(f"make run serves the demo: demo / demo signed in at {base}")
