function sign(req) {
  req.headers["X-Signature"] = perfops.hmac("sha256", "k", req.path);
}
