// A token that expires: a 401 is answered by logging in again and retrying.

// The response hook of `private`: 200 and 401 are both answers the flow
// expects; which one it was is kept for `route`.
function note_status(res) {
  vars.status = String(res.status);
  return true;
}

// A script step: after a 200 the flow is done; after a 401 it goes on to
// `login` and `private again`.
function route() {
  if (vars.status === "200") {
    return false;
  }
}
