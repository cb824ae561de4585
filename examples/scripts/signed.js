// Signs each request as the API asks: HMAC-SHA256 with the shared secret over
// METHOD \n PATH \n TIMESTAMP \n BODY (the path with its query, as sent), hex,
// in X-Signature, with the timestamp in X-Timestamp. The hook sees the request
// as it will be sent (defaults' headers included) and what it returns is sent.

// A demo secret: the testkit's API checks it. Keep a real one out of the file
// (a setup step can fetch it and save it: `vars.secret`).
const SECRET = "demo-secret";

function sign(req) {
  const ts = String(Date.now()); // the run's clock
  const message = [req.method, req.path, ts, req.body].join("\n");
  req.headers["X-Timestamp"] = ts;
  req.headers["X-Signature"] = perfops.hmac("sha256", vars.secret || SECRET, message);
}
