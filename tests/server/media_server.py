#!/usr/bin/env python3
"""A tiny HTTP server of image URLs for the reliability tests (reliability_images_test.cpp): prints
its port, then serves GET /<file> from DIR, /redirect (302 to the first file), /slow (sends one byte,
then nothing for 30 s), /big (more bytes than any image limit, as fast as it can).

    python3 media_server.py DIR
"""
import http.server
import os
import sys
import time

DIR = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/" + sorted(os.listdir(DIR))[0])
            self.end_headers()
        elif self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"\x89")
            self.wfile.flush()
            time.sleep(30)
        elif self.path == "/big":
            self.send_response(200)
            self.end_headers()
            chunk = b"\0" * (1 << 20)
            try:
                for _ in range(64):
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            path = os.path.join(DIR, os.path.basename(self.path))
            if not os.path.isfile(path):
                self.send_response(404)
                self.end_headers()
                return
            data = open(path, "rb").read()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
