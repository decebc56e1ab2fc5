// Echo and broadcast server on Node's `ws`, one process: on /broadcast every
// message received is sent to every client of that path; on any other path it
// is sent back as it came. permessage-deflate is on (ws's own defaults for
// its parameters: threshold 1024 bytes, context takeover on; with
// `no-context-takeover`, the server answers server_no_context_takeover and
// compresses each message on its own, as Celer does).
//
// node server.js PORT [no-context-takeover]
'use strict';
const http = require('http');
const { WebSocketServer } = require('ws');

const port = Number(process.argv[2] || 9003);
const deflate = process.argv[3] === 'no-context-takeover' ? { serverNoContextTakeover: true } : true;
const server = http.createServer((req, res) => { res.writeHead(426); res.end(); });
const echo = new WebSocketServer({ noServer: true, perMessageDeflate: deflate, maxPayload: 64 << 20 });
const hub = new WebSocketServer({ noServer: true, perMessageDeflate: deflate });
server.on('upgrade', (req, sock, head) => {
  const wss = req.url.split('?')[0] === '/broadcast' ? hub : echo;
  wss.handleUpgrade(req, sock, head, (ws) => wss.emit('connection', ws, req));
});
echo.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
});
hub.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => {
    for (const c of hub.clients) c.send(data, { binary: isBinary });
  });
});
server.listen(port, '127.0.0.1', () => console.error(`ws-node listening on 127.0.0.1:${port}`));
