# The testkit's Server-Sent Events server (perfops_testkit::python::sse):
# aiohttp with aiohttp-sse from PyPI. Prints its port, then serves
#   /events?n=N&every=MS   N events MS apart, then the end
#   /stall?k=K&every=MS    K events, then silence with the stream open
#   /forever?every=MS      events until the client goes
#   /json?n=N&every=MS     N unnamed events of JSON data {"i":I}, the last {"i":N-1,"result":"rN-1"}
#   /equal?a=X&b=Y         200 when X == Y, else 409 (a saved value sent back, checked)
# Events are named `tick`, ids 0, 1, ..., data `tick I` (the last of /events: `done`).
# Run by bench/stream-wire.sh too.
import asyncio, json, sys
from aiohttp import web
from aiohttp_sse import sse_response

async def paced(request, n, every_ms, stall_after=None):
    # Events at absolute instants (start + i * every): the server's own
    # lateness does not add up, so the gaps on the wire are `every` each.
    loop = asyncio.get_running_loop()
    async with sse_response(request) as resp:
        resp.ping_interval = 3600
        t0 = loop.time()
        i = 0
        while n is None or i < n:
            if stall_after is not None and i == stall_after:
                await asyncio.sleep(3600)
            await asyncio.sleep(max(0.0, t0 + i * every_ms / 1000.0 - loop.time()))
            last = n is not None and i == n - 1
            await resp.send('done' if last else 'tick %d' % i, event='tick', id=str(i))
            i += 1
    return resp

async def json_events(request):
    n, every_ms = arg(request, 'n', 5), arg(request, 'every', 20)
    loop = asyncio.get_running_loop()
    async with sse_response(request) as resp:
        resp.ping_interval = 3600
        t0 = loop.time()
        for i in range(n):
            await asyncio.sleep(max(0.0, t0 + i * every_ms / 1000.0 - loop.time()))
            data = {'i': i}
            if i == n - 1:
                data['result'] = 'r%d' % i
            await resp.send(json.dumps(data, separators=(',', ':')))
    return resp

async def equal(request):
    a, b = request.query.get('a'), request.query.get('b')
    same = a is not None and a == b
    return web.Response(status=200 if same else 409, text='%r %r\n' % (a, b))

def arg(request, name, default):
    return int(request.query.get(name, default))

async def events(request):
    return await paced(request, arg(request, 'n', 10), arg(request, 'every', 20))

async def stall(request):
    return await paced(request, None, arg(request, 'every', 20), stall_after=arg(request, 'k', 3))

async def forever(request):
    return await paced(request, None, arg(request, 'every', 20))

async def main():
    app = web.Application()
    app.router.add_get('/events', events)
    app.router.add_get('/stall', stall)
    app.router.add_get('/forever', forever)
    app.router.add_get('/json', json_events)
    app.router.add_get('/equal', equal)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, '127.0.0.1', 0)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Future()
asyncio.run(main())
