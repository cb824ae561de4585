// Follows a paginated API to its end: GET /items?page=N answers
// {"items": [...], "next": N+1} and "next": null on the last page.

// A script step: the flow instance starts at page 1.
function first_page() {
  vars.page = 1;
}

// The response hook of `page`: a page without items fails the step (the reason
// is in failures.jsonl); otherwise where the next page is, or "" at the end.
function read_page(res) {
  const page = JSON.parse(res.body);
  if (!Array.isArray(page.items)) {
    return { ok: false, reason: "page " + vars.page + " has no items" };
  }
  vars.next = page.next === null ? "" : String(page.next);
  return true;
}

// A script step: back to `page` while there is a next one, else the flow ends.
function follow() {
  if (vars.next === "") {
    return false;
  }
  vars.page = vars.next;
  return "page";
}
