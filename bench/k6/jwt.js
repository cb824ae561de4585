// The 2-step JWT scenario of bench/scenario/jwt.yaml, for k6 (used by bench/scenario.sh).
//
//   setup:  POST /auth once, token = JSONPath $.token (k6: res.json('token'), a gjson path)
//   each iteration (one request), 1 in RELOGIN_EVERY (1001):
//           POST /auth again, the VU keeps the new token            (perfops: weight 1)
//   otherwise:
//           GET /orders with `Authorization: Bearer <token>`, check status 200 (weight 1000)
//
// Closed model: VUS constant VUs looping for DURATION, as fast as the target answers.
// Requests carry a `name` tag (login / auth / orders); the thresholds below only make
// k6 export those per-tag counts to the summary (they always pass).
//
// Env: BASE_URL (http://127.0.0.1:18091), VUS (50), DURATION (10s), RELOGIN_EVERY (1001),
//      SUMMARY (path of the JSON summary written by handleSummary; default stdout).
//
// Response bodies are discarded (discardResponseBodies) except for /auth, whose token
// is needed: k6's documented setting for load generation, so k6 is measured at its
// most efficient. perfops likewise reads /orders only for its status (expect).
import http from 'k6/http';
import { check, fail } from 'k6';
import exec from 'k6/execution';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:18091';
const RELOGIN_EVERY = Number(__ENV.RELOGIN_EVERY || 1001);
const ORDERS_URL = `${BASE}/orders`;
const AUTH_PARAMS = {
  headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
  responseType: 'text', // the token is read from the body
  tags: { name: 'auth' },
};

export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ['min', 'med', 'p(90)', 'p(99)', 'max', 'avg'],
  scenarios: {
    jwt: {
      executor: 'constant-vus',
      vus: Number(__ENV.VUS || 50),
      duration: __ENV.DURATION || '10s',
      gracefulStop: '0s',
    },
  },
  thresholds: {
    'http_reqs{name:login}': ['count>=0'],
    'http_reqs{name:auth}': ['count>=0'],
    'http_reqs{name:orders}': ['count>=0'],
    'http_req_failed{name:auth}': ['rate>=0'],
    'http_req_failed{name:orders}': ['rate>=0'],
  },
};

function login(name, user) {
  const params = Object.assign({}, AUTH_PARAMS, { tags: { name } });
  const res = http.post(`${BASE}/auth`, JSON.stringify({ user }), params);
  const ok = check(res, { 'auth 200': (r) => r.status === 200 });
  const token = ok ? res.json('token') : null;
  return typeof token === 'string' && token.length > 0 ? token : null;
}

export function setup() {
  const token = login('login', 'load-test');
  if (token === null) fail('setup: POST /auth did not return {"token": ...}');
  return { token };
}

let token = null; // per VU: the setup token, replaced by each re-login of this VU
let ordersParams = null; // built once per token, not per request

function useToken(t) {
  token = t;
  ordersParams = {
    headers: { Accept: 'application/json', Authorization: `Bearer ${t}` },
    tags: { name: 'orders' },
  };
}

export default function (data) {
  if (token === null) useToken(data.token);
  const i = exec.scenario.iterationInTest;
  if (i % RELOGIN_EVERY === RELOGIN_EVERY - 1) {
    const t = login('auth', `u-${i}`);
    if (t !== null) useToken(t);
    return;
  }
  const res = http.get(ORDERS_URL, ordersParams);
  check(res, { 'orders 200': (r) => r.status === 200 });
}

export function handleSummary(data) {
  const out = JSON.stringify(data);
  return __ENV.SUMMARY ? { [__ENV.SUMMARY]: out } : { stdout: out };
}
