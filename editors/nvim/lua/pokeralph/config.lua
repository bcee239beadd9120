-- The plugin's options (setup() merges the user's over these defaults).
local M = {}

M.defaults = {
  -- The socket when $POKERALPH_SOCKET is not set (default: as pokeralphctl finds it).
  socket = nil,
  -- A request not answered within this many milliseconds fails.
  timeout_ms = 30000,
  -- Reconnecting after the daemon went away: the first wait, doubling up to the last.
  reconnect_min_ms = 200,
  reconnect_max_ms = 10000,
  -- At most this many requests wait for an answer at once (more fail at once).
  max_pending = 256,
  -- The longest message read from the daemon (its replies are at most 16 MiB).
  max_message_bytes = 32 * 1024 * 1024,
  -- Read but not yet handled: past this the connection is dropped and resumed.
  max_backlog_bytes = 64 * 1024 * 1024,
  -- Lines a follow buffer keeps (the oldest go first).
  follow_max_lines = 10000,
  -- The statusline is refreshed this long after the last event that changes it.
  statusline_debounce_ms = 300,
  -- How a message reaches the person.
  notify = function(msg, level)
    vim.notify(msg, level)
  end,
}

M.options = vim.deepcopy(M.defaults)

function M.setup(opts)
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
end

return M
