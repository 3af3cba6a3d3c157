// Sends events with npm lumberjack-protocol (v1 over TLS, one W per connection, plain D frames).
// usage: node protocol.js PORT CA_PEM COUNT
'use strict'
const fs = require('fs')
const lumberjack = require('lumberjack-protocol')

const [port, caPath, count] = process.argv.slice(2)
const client = lumberjack.client(
  { host: '127.0.0.1', port: Number(port), ca: [fs.readFileSync(caPath, 'utf-8')], servername: 'localhost' },
  { windowSize: 3 })
client.on('connect', () => {
  for (let i = 0; i < Number(count); i++) {
    client.writeDataFrame({ line: `hello v1 ${i}`, file: '/var/log/a.log', offset: String(i) })
  }
  setTimeout(() => { client.close(); console.log('done'); process.exit(0) }, 500)
})
