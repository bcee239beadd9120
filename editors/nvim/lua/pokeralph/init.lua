-- pokeralph for Neovim: a client of pokeralphd's socket protocol (JSON-RPC 2.0, one
-- JSON message per line). Pure Lua on Neovim's own libuv binding, no dependencies.
--
--   require('pokeralph').setup({ socket = nil })   -- optional
--   require('pokeralph').statusline()              -- a statusline component
--
-- Modules: paths (where the socket is), framing (newline framing), client (the one
-- connection: requests, events, reconnect with `since`), repo (which repository),
-- commands (:Pokeralph), inbox (answers from feedback schemas), views (follow, diff),
-- statusline, health (:checkhealth pokeralph).
local M = {}

function M.setup(opts)
  require('pokeralph.config').setup(opts)
end

--- The statusline component's text (see pokeralph.statusline).
function M.statusline()
  return require('pokeralph.statusline').component()
end

--- Call a protocol method: `cb(err, result)` runs on the main loop.
function M.request(method, params, cb)
  require('pokeralph.client').request(method, params, cb)
end

--- Call `fn(event)` for every event the daemon publishes; returns an id.
function M.on_event(fn)
  return require('pokeralph.client').on_event(fn)
end

return M
