// Sends events with npm lumberjack-client (v2, zlib, seq 1..n per window; it never reads ACKs).
// usage: node client.js PORT QUEUED SINGLES
// QUEUED events are logged before the connection is up (they go out as one window), then SINGLES
// events are logged one at a time (each its own window), 150 ms apart. Prints "done" and exits.
'use strict'
const LumberjackClient = require('lumberjack-client')

const [port, queued, singles] = process.argv.slice(2).map(Number)
const client = new LumberjackClient({ host: '127.0.0.1', port })
let n = 0
const event = () => ({ '@timestamp': new Date(Date.UTC(2026, 10, 21, 6, 0, n)).toISOString(),
  message: `npm line ${n}`, n: n++, agent: { type: 'lumberjack-client' } })
for (let i = 0; i < queued; i++) client.log(event())
let left = singles
const tick = () => {
  if (left-- > 0) {
    client.log(event())
    setTimeout(tick, 150)
    return
  }
  setTimeout(() => { client.socket.end(); console.log('done'); process.exit(0) }, 300)
}
const wait = () => (client.connected ? setTimeout(tick, 150) : setTimeout(wait, 20))
wait()
