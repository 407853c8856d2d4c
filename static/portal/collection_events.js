// A collection's events, live over /ws/collections/<id>/: `follow` opens the socket, hands
// each event to `handle`, and opens it again 5 s after it closes (not after 4401, logged out,
// or 4404, no longer visible). `onOpen` and `onClose` let a page poll meanwhile.

export function follow(collectionId, handle, { onOpen = () => {}, onClose = () => {} } = {}) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/collections/${collectionId}/`);
  socket.addEventListener("open", onOpen);
  socket.addEventListener("message", (message) => handle(JSON.parse(message.data)));
  socket.addEventListener("close", (event) => {
    if (event.code === 4401 || event.code === 4404) return;
    onClose();
    setTimeout(() => follow(collectionId, handle, { onOpen, onClose }), 5000);
  });
}

// A form being sent (Sync now, Evaluate, Flip anyway) brings its own page with its message:
// a reload for an event its action caused would race it and lose the message.
let leaving = false;
document.addEventListener("submit", () => { leaving = true; });

export function isLeaving() {
  return leaving;
}
