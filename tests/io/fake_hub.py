#!/usr/bin/env python3
"""A stand-in for the Hugging Face Hub's plain HTTP API, on 127.0.0.1, for tests/io/hub_test.cpp.

It serves GET /api/models/{org}/{name}/revision/{rev} (the commit and the file list) and
GET /{org}/{name}/resolve/{rev}/{file} (a file, honouring "Range: bytes=N-"). The spec (a JSON
file, the first argument) names the repositories:
  {"port_file": PATH, "log": PATH,
   "repos": {"org/name": {"refs": {"main": SHA, ...}, "commits": {SHA: DIR, ...},
                          "token": TOKEN or null, "extra_files": [NAME, ...]}},
   "cut_once": FILE, "chunk_delay_s": SECONDS}
cut_once: the first answer for that file stops halfway and the connection closes.
chunk_delay_s: a pause after each 256 KiB of a file, to make a download last.
Each request is logged as one JSON line: path, range, authorization.
"""
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SPEC = json.load(open(sys.argv[1]))
LOCK = threading.Lock()
CUT_DONE = set()


def log(entry):
    with LOCK, open(SPEC["log"], "a") as f:
        f.write(json.dumps(entry) + "\n")


class Hub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def repo(self, org, name):
        repo = SPEC["repos"].get(org + "/" + name)
        if repo is None:
            self.answer(404, '{"error": "Repository not found"}')
            return None
        token = repo.get("token")
        if token and self.headers.get("Authorization") != "Bearer " + token:
            self.answer(401, '{"error": "Access to this model is restricted"}')
            return None
        return repo

    def commit(self, repo, rev):
        sha = rev if rev in repo["commits"] else repo["refs"].get(rev)
        if sha is None:
            self.answer(404, '{"error": "Revision Not Found"}')
        return sha

    def do_GET(self):
        parts = [urllib.parse.unquote(p) for p in self.path.split("?")[0].split("/")[1:]]
        log({"path": self.path, "range": self.headers.get("Range"),
             "authorization": self.headers.get("Authorization")})
        if len(parts) == 6 and parts[:2] == ["api", "models"] and parts[4] == "revision":
            repo = self.repo(parts[2], parts[3])
            sha = repo and self.commit(repo, parts[5])
            if not sha:
                return
            files = sorted(os.listdir(repo["commits"][sha])) + repo.get("extra_files", [])
            info = {"id": parts[2] + "/" + parts[3], "sha": sha,
                    "siblings": [{"rfilename": f} for f in files]}
            return self.answer(200, json.dumps(info))
        if len(parts) == 5 and parts[2] == "resolve":
            repo = self.repo(parts[0], parts[1])
            sha = repo and self.commit(repo, parts[3])
            if not sha:
                return
            path = os.path.join(repo["commits"][sha], parts[4])
            if "/" in parts[4] or not os.path.isfile(path):
                return self.answer(404, '{"error": "Entry not found"}')
            return self.send_file(path, parts[4])
        self.answer(404, '{"error": "no such route"}')

    def send_file(self, path, name):
        data = open(path, "rb").read()
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        body = data[start:]
        with LOCK:
            cut = SPEC.get("cut_once") == name and name not in CUT_DONE
            CUT_DONE.add(name)
        if cut:
            body = body[: len(body) // 2]
        delay = SPEC.get("chunk_delay_s", 0)
        step = 256 * 1024
        for i in range(0, len(body), step):
            self.wfile.write(body[i:i + step])
            if delay:
                self.wfile.flush()
                time.sleep(delay)
        if cut:
            self.wfile.flush()
            self.close_connection = True


server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
server.daemon_threads = True
with open(SPEC["port_file"] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(SPEC["port_file"] + ".tmp", SPEC["port_file"])
server.serve_forever()
