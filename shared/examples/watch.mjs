// A pokeralphd client in Node with vscode-jsonrpc (LSP Content-Length framing, which the
// daemon detects per connection). `npm install vscode-jsonrpc` then `node watch.mjs`.
import net from "node:net";
import os from "node:os";
import path from "node:path";
import * as rpc from "vscode-jsonrpc/node.js";

const socketPath =
  process.env.POKERALPH_SOCKET ??
  path.join(process.env.XDG_RUNTIME_DIR ?? `/run/user/${os.userInfo().uid}`, "pokeralph", "pokeralphd.sock");

const socket = net.createConnection(socketPath);
const connection = rpc.createMessageConnection(
  new rpc.SocketMessageReader(socket),
  new rpc.SocketMessageWriter(socket),
);
connection.onNotification("event", (event) => {
  console.log(event.seq, event.repo ?? "-", event.taskId ?? "", event.type);
});
connection.listen();

const status = await connection.sendRequest("daemon.status", {});
console.log(`pokeralphd ${status.version}, pid ${status.pid}, ${status.repositories.length} repositories`);
const sub = await connection.sendRequest("events.subscribe", {});
console.log(`subscribed (#${sub.subscription}) at seq ${sub.seq}`);
