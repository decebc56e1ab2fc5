# Asks every server in spec["servers"] the requests in spec["requests"],
# replacing {etag} and {lm} in header values with that server's own ETag and
# Last-Modified for the request's path; prints the answers as JSON.
import http.client
import json
import sys

spec = json.loads(sys.argv[1])


def ask(port, method, path, headers):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers=headers)
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return res.status, {k.lower(): v for k, v in res.getheaders()}, body


out = {}
for name, port in spec["servers"].items():
    validators = {}
    rows = []
    for req in spec["requests"]:
        path = req["path"]
        if path not in validators:
            _, h, _ = ask(port, "GET", path, {})
            validators[path] = {"{etag}": h.get("etag", ""), "{lm}": h.get("last-modified", "")}
        headers = {}
        for key, value in req["headers"]:
            for placeholder, actual in validators[path].items():
                value = value.replace(placeholder, actual)
            headers[key] = value
        status, h, body = ask(port, req["method"], path, headers)
        rows.append({
            "status": status,
            "content_range": h.get("content-range"),
            "content_type": h.get("content-type"),
            "body": body.hex(),
        })
    out[name] = rows
print(json.dumps(out))
