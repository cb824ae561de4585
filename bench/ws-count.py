# Debian's python3-websockets (its legacy asyncio server, 10.4 on Debian 12) as
# a WebSocket echo that counts what it holds, for bench/ws-loop.sh:
#
#     python3 bench/ws-count.py [PORT [BACKLOG]]     # PORT 0: any; BACKLOG: asyncio's 100
#
# Prints its port, then on SIGTERM or SIGINT one line: "accepted A max_open M
# max_handlers H": TCP connections accepted, the most open at once (from
# connection_made to connection_lost: what the server holds, a connection the
# client gave up on included until the server reads its end), and the most
# upgraded connections whose handler ran at once.
import sys
sys.path.append('/usr/lib/python3/dist-packages')
import asyncio, os, signal, websockets
from websockets.legacy.server import WebSocketServerProtocol
st = {'open': 0, 'max_open': 0, 'accepted': 0, 'handlers': 0, 'max_handlers': 0}
class Counting(WebSocketServerProtocol):
    def connection_made(self, transport):
        st['accepted'] += 1
        st['open'] += 1
        st['max_open'] = max(st['max_open'], st['open'])
        super().connection_made(transport)
    def connection_lost(self, exc):
        st['open'] -= 1
        super().connection_lost(exc)
async def serve(ws, path=None):
    st['handlers'] += 1
    st['max_handlers'] = max(st['max_handlers'], st['handlers'])
    try:
        async for message in ws:
            await ws.send(message)
    finally:
        st['handlers'] -= 1
async def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    backlog = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    stop = asyncio.get_running_loop().create_future()
    for s in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(s, stop.set_result, None)
    async with websockets.serve(serve, '127.0.0.1', port, create_protocol=Counting, backlog=backlog) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await stop
        print(f"accepted {st['accepted']} max_open {st['max_open']} max_handlers {st['max_handlers']}", flush=True)
        # No graceful shutdown: closing thousands of connections says nothing more.
        os._exit(0)
asyncio.run(main())
