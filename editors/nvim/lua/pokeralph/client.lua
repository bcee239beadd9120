-- The one connection to pokeralphd: JSON-RPC 2.0 over its Unix socket with newline
-- framing, on Neovim's own libuv binding. Everything is asynchronous: a request's
-- callback runs later on the main loop, never while the editor waits.
--
-- The connection subscribes to every event and dispatches them to listeners. It keeps
-- its place in the stream as pokeralphctl.client.EventCursor does: after a reconnect it
-- subscribes with `since` = the last sequence number seen, so what was missed is
-- replayed; when the daemon restarted meanwhile (another `epoch`) the new daemon's
-- history is replayed from its start and listeners are told.
--
-- A dead daemon is one message, not a storm: losing the connection says so once, then
-- the client retries in the background with a growing wait (reconnect_min_ms doubling
-- to reconnect_max_ms) and says once more when it is back. A request made meanwhile
-- tries to connect at once and, failing, gets one error saying how to start the daemon.
--
-- Every buffer is bounded: the partial line (max_message_bytes), what was read but not
-- yet handled (max_backlog_bytes: past it the connection is dropped and resumed with
-- `since`), the requests waiting for an answer (max_pending), and the events held while
-- a subscription is being made.
local uv = vim.loop
local config = require('pokeralph.config')
local framing = require('pokeralph.framing')
local paths = require('pokeralph.paths')
local util = require('pokeralph.util')

local M = {}

--- What to tell a person when the daemon under the subscription restarted.
M.RESTARTED = 'the daemon restarted; events from before are not replayed'

local MAX_EARLY_EVENTS = 10000

local S = {
  status = 'idle', -- idle | connecting | up | down
  wanted = false, -- whether to keep (re)connecting
  pipe = nil,
  decoder = nil,
  backlog = 0, -- bytes read, not yet handled
  next_id = 0,
  pending = {}, -- id -> {cb, timer, internal}
  npending = 0,
  queue = {}, -- requests made before the connection is up
  early = nil, -- events received while subscribing
  cursor = { seq = nil, epoch = nil },
  listeners = {},
  state_listeners = {},
  next_listener = 0,
  retry_timer = nil,
  backoff = nil,
  lost_connection = false, -- a message said the connection is gone
  socket = nil,
  socket_source = nil,
  last_error = nil,
  daemon = nil, -- the last daemon.status
  connects = 0, -- how many times a connection came up
  attempts = 0, -- how many times a connection was tried
}

local function schedule(fn)
  vim.schedule(fn)
end

local function close_timer(timer)
  if timer ~= nil and not timer:is_closing() then
    timer:stop()
    timer:close()
  end
end

local function not_running(reason)
  return {
    code = nil,
    disconnected = true,
    message = ('pokeralphd is not running on %s (%s). Start it with `pokeralphctl daemon start`, or `systemctl --user start pokeralphd`.'):format(
      S.socket or '?',
      reason
    ),
  }
end

local function emit_state(info)
  for _, fn in pairs(S.state_listeners) do
    local ok, err = pcall(fn, S.status, info or {})
    if not ok then
      util.error('a state listener failed: ' .. tostring(err))
    end
  end
end

local function dispatch(event)
  local seq = util.val(event.seq)
  if type(seq) == 'number' then
    if S.cursor.seq ~= nil and seq <= S.cursor.seq then
      return -- seen already (a replay overlapping what we had)
    end
    S.cursor.seq = seq
  end
  for id, fn in pairs(S.listeners) do
    local ok, err = pcall(fn, event)
    if not ok then
      S.listeners[id] = nil -- a broken listener is dropped, not repeated per event
      util.error('an event listener failed and was removed: ' .. tostring(err))
    end
  end
end

local function write(message)
  local ok, line = pcall(vim.json.encode, message)
  if not ok then
    return 'cannot encode the request: ' .. tostring(line)
  end
  local pipe = S.pipe
  if pipe == nil then
    return 'not connected'
  end
  local wok, werr = pcall(pipe.write, pipe, line .. '\n')
  if not wok then
    return tostring(werr)
  end
  return nil
end

-- Send a request on the open connection; `cb(err, result)` runs on the main loop.
local function send(method, params, cb, opts)
  opts = opts or {}
  if S.npending >= config.options.max_pending then
    schedule(function()
      cb({ message = ('too many requests waiting (%d)'):format(config.options.max_pending) })
    end)
    return
  end
  S.next_id = S.next_id + 1
  local id = S.next_id
  local message = { jsonrpc = '2.0', id = id, method = method }
  if params ~= nil and next(params) ~= nil then
    message.params = params
  end
  local entry = { cb = cb }
  S.pending[id] = entry
  S.npending = S.npending + 1
  local timeout = opts.timeout_ms or config.options.timeout_ms
  if timeout and timeout > 0 then
    entry.timer = uv.new_timer()
    entry.timer:start(timeout, 0, function()
      schedule(function()
        if S.pending[id] == entry then
          S.pending[id] = nil
          S.npending = S.npending - 1
          close_timer(entry.timer)
          cb({ message = ('%s: no answer within %d ms'):format(method, timeout) })
        end
      end)
    end)
  end
  local err = write(message)
  if err ~= nil then
    M._drop('write failed: ' .. err)
  end
end

local function settle(id, err, result)
  local entry = S.pending[id]
  if entry == nil then
    return -- answered after its timeout, or not ours
  end
  S.pending[id] = nil
  S.npending = S.npending - 1
  close_timer(entry.timer)
  entry.cb(err, result)
end

local function handle_message(message)
  if type(message) ~= 'table' then
    return
  end
  local id = util.val(message.id)
  if id == nil then
    if message.method == 'event' and type(message.params) == 'table' then
      if S.early ~= nil then
        if #S.early < MAX_EARLY_EVENTS then
          table.insert(S.early, message.params)
        end
      else
        dispatch(message.params)
      end
    end
    return
  end
  local err = util.val(message.error)
  if err ~= nil then
    settle(id, {
      code = util.val(err.code),
      message = util.val(err.message) or 'error',
      data = util.val(err.data),
    })
  else
    settle(id, nil, util.val(message.result))
  end
end

local function flush_queue()
  local queue = S.queue
  S.queue = {}
  for _, item in ipairs(queue) do
    send(item.method, item.params, item.cb, item.opts)
  end
end

local function fail_queue(err)
  local queue = S.queue
  S.queue = {}
  for _, item in ipairs(queue) do
    item.cb(err)
  end
end

local function schedule_retry()
  if not S.wanted or S.retry_timer ~= nil then
    return
  end
  local opts = config.options
  S.backoff = S.backoff and math.min(S.backoff * 2, opts.reconnect_max_ms) or opts.reconnect_min_ms
  S.retry_timer = uv.new_timer()
  S.retry_timer:start(S.backoff, 0, function()
    schedule(function()
      close_timer(S.retry_timer)
      S.retry_timer = nil
      if S.wanted and (S.status == 'down' or S.status == 'idle') then
        M._connect()
      end
    end)
  end)
end

--- Drop the connection (`reason` says why), fail what waits on it, and retry later
--- (`quiet`: no message, as when the person stops it).
function M._drop(reason, quiet)
  local pipe = S.pipe
  S.pipe = nil
  S.decoder = nil
  S.early = nil
  if pipe ~= nil then
    pcall(pipe.read_stop, pipe)
    if not pipe:is_closing() then
      pipe:close()
    end
  end
  local was_up = S.status == 'up'
  S.status = 'down'
  S.last_error = reason
  local err = not_running(reason)
  local pending = S.pending
  S.pending, S.npending = {}, 0
  for _, entry in pairs(pending) do
    close_timer(entry.timer)
    entry.cb(err)
  end
  fail_queue(err)
  if was_up and not quiet and not S.lost_connection then
    S.lost_connection = true
    util.warn(('lost the connection to pokeralphd (%s); reconnecting in the background'):format(reason))
  end
  emit_state({ reason = reason })
  schedule_retry()
end

local function on_chunk(pipe, err, data)
  if pipe ~= S.pipe then
    return -- a connection dropped already
  end
  if err ~= nil then
    M._drop('read failed: ' .. tostring(err))
    return
  end
  if data == nil then
    M._drop('the daemon closed the connection')
    return
  end
  local lines, ferr = S.decoder:feed(data)
  if lines == nil then
    M._drop(ferr)
    return
  end
  for _, line in ipairs(lines) do
    local ok, message = pcall(vim.json.decode, line)
    if not ok then
      M._drop('the daemon sent invalid JSON')
      return
    end
    handle_message(message)
    if pipe ~= S.pipe then
      return -- a callback dropped the connection
    end
  end
end

-- The connection is open: ask which daemon answers, subscribe from where we stand,
-- then let the queued requests go.
local function handshake()
  send('daemon.status', nil, function(err, status)
    if err ~= nil then
      if S.status == 'connecting' then
        M._drop(util.describe_error(err))
      end
      return
    end
    S.daemon = status
    local epoch = util.val(status.epoch)
    local restarted = S.cursor.epoch ~= nil and epoch ~= nil and epoch ~= S.cursor.epoch
    local params = {}
    if restarted then
      params.since = 0 -- the new daemon's whole history is new to us
    elseif S.cursor.seq ~= nil then
      params.since = S.cursor.seq
    end
    S.early = {}
    send('events.subscribe', params, function(serr, result)
      if serr ~= nil then
        if S.status == 'connecting' then
          M._drop(util.describe_error(serr))
        end
        return
      end
      if restarted then
        S.cursor.seq = 0
      elseif S.cursor.seq == nil then
        S.cursor.seq = util.val(result.seq) or 0
      end
      S.cursor.epoch = util.val(result.epoch) or epoch
      local early = S.early or {}
      S.early = nil
      S.status = 'up'
      S.backoff = nil
      S.connects = S.connects + 1
      if S.lost_connection then
        S.lost_connection = false
        util.notify('connected to pokeralphd again')
      end
      if restarted then
        util.warn(M.RESTARTED)
      end
      local lost = util.val(result.lost)
      if type(lost) == 'number' and lost > 0 then
        util.warn(('%d events were lost while disconnected'):format(lost))
      end
      emit_state({ restarted = restarted, lost = lost, replayed = util.val(result.replayed) })
      for _, event in ipairs(early) do
        dispatch(event)
      end
      flush_queue()
    end)
  end)
end

function M._connect()
  if S.status == 'connecting' or S.status == 'up' then
    return
  end
  close_timer(S.retry_timer)
  S.retry_timer = nil
  S.socket, S.socket_source = paths.socket_path(config.options.socket)
  local refused = paths.check_socket_file(S.socket)
  if refused ~= nil then
    S.status = 'down'
    S.last_error = refused
    fail_queue({ disconnected = true, message = refused })
    emit_state({ reason = refused })
    schedule_retry()
    return
  end
  S.status = 'connecting'
  S.attempts = S.attempts + 1
  local pipe = uv.new_pipe(false)
  S.pipe = pipe
  S.decoder = framing.decoder(config.options.max_message_bytes)
  S.backlog = 0
  pipe:connect(S.socket, function(cerr)
    schedule(function()
      if pipe ~= S.pipe then
        return
      end
      if cerr ~= nil then
        local reason = cerr
        if tostring(cerr):match('ENOENT') then
          reason = 'no socket file'
        elseif tostring(cerr):match('ECONNREFUSED') then
          reason = 'connection refused: stale socket'
        end
        M._drop(reason)
        return
      end
      pipe:read_start(function(rerr, data)
        -- a libuv callback: only count the bytes here, handle them on the main loop
        if data ~= nil then
          S.backlog = S.backlog + #data
        end
        local over = S.backlog > config.options.max_backlog_bytes
        schedule(function()
          if data ~= nil then
            S.backlog = S.backlog - #data
          end
          if over and pipe == S.pipe then
            M._drop('the editor fell behind the daemon')
            return
          end
          on_chunk(pipe, rerr, data)
        end)
      end)
      handshake()
    end)
  end)
end

--- Start connecting (and keep reconnecting) unless already started.
function M.start()
  S.wanted = true
  if S.status == 'idle' or (S.status == 'down' and S.retry_timer == nil) then
    M._connect()
  end
end

--- Close the connection and stop reconnecting.
function M.stop()
  S.wanted = false
  close_timer(S.retry_timer)
  S.retry_timer = nil
  if S.pipe ~= nil then
    M._drop('stopped', true)
  end
  S.status = 'idle'
  S.lost_connection = false
end

--- Call `method` with `params` (a table of named params, or nil); `cb(err, result)`
--- runs on the main loop. `err` is nil, or {code, message, data} (a JSON-RPC error),
--- or {disconnected = true, message} when no daemon answers.
function M.request(method, params, cb, opts)
  cb = cb or function() end
  S.wanted = true
  if S.status == 'up' then
    send(method, params, cb, opts)
    return
  end
  if #S.queue >= config.options.max_pending then
    schedule(function()
      cb({ message = 'too many requests waiting for the connection' })
    end)
    return
  end
  table.insert(S.queue, { method = method, params = params, cb = cb, opts = opts })
  if S.status ~= 'connecting' then
    M._connect() -- a person asked: try now rather than at the next retry
  end
end

--- Call `fn(event)` for every event (the params of an `event` notification); returns
--- an id for off().
function M.on_event(fn)
  S.next_listener = S.next_listener + 1
  S.listeners[S.next_listener] = fn
  return S.next_listener
end

function M.off(id)
  S.listeners[id] = nil
  S.state_listeners[id] = nil
end

--- Call `fn(status, info)` when the connection comes up ('up'; info.restarted, info.lost)
--- or goes ('down'; info.reason); returns an id for off().
function M.on_state(fn)
  S.next_listener = S.next_listener + 1
  S.state_listeners[S.next_listener] = fn
  return S.next_listener
end

--- A copy of what the client knows: status, socket, cursor, last error, daemon.status.
function M.info()
  return {
    status = S.status,
    socket = S.socket or paths.socket_path(config.options.socket),
    socket_source = S.socket_source,
    seq = S.cursor.seq,
    epoch = S.cursor.epoch,
    last_error = S.last_error,
    daemon = S.daemon,
    connects = S.connects,
    attempts = S.attempts,
    pending = S.npending,
  }
end

--- Call and wait (for :checkhealth and tests only: it blocks, at most `timeout_ms`).
function M.request_sync(method, params, timeout_ms)
  local done, err, result = false, nil, nil
  M.request(method, params, function(e, r)
    done, err, result = true, e, r
  end, { timeout_ms = timeout_ms })
  vim.wait(timeout_ms or 5000, function()
    return done
  end, 10)
  if not done then
    return { message = method .. ': no answer in time' }, nil
  end
  return err, result
end

return M
