// The answer to a one-time login link: keep the session's page key where only this
// origin (this port) can read it, then show the dashboard. The key goes with every
// WebSocket and delivery request; the cookie alone, which browsers also send to other
// ports of this host, opens nothing but the page (see pokeralphd/web/auth.py).

const meta = document.querySelector('meta[name="pokeralph-key"]');
if (meta) localStorage.setItem("pokeralph.key", meta.content);
location.replace("/");
