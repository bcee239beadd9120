-- :checkhealth pokeralph: the socket (where, how it was found, whether it may be
-- used), the daemon (reachable, version, pid), the protocol (the OpenRPC document's
-- version, and every method this plugin uses present), and the current repository.
-- Works with vim.health (Neovim 0.8+) and the `health` module of 0.7.
local client = require('pokeralph.client')
local config = require('pokeralph.config')
local paths = require('pokeralph.paths')
local repo = require('pokeralph.repo')
local util = require('pokeralph.util')

local M = {}

--- The methods the plugin calls.
M.METHODS = {
  'battle.approve',
  'battle.cancel',
  'battle.current',
  'battle.diff',
  'battle.pause',
  'battle.resume',
  'battle.start',
  'daemon.status',
  'events.subscribe',
  'inbox.answer',
  'inbox.get',
  'inbox.list',
  'repo.status',
  'rpc.discover',
  'task.list',
}

local function reporter()
  local h = vim.health
  if h ~= nil and h.start ~= nil then
    return h
  end
  local old = h or require('health')
  return {
    start = old.report_start,
    ok = old.report_ok,
    warn = old.report_warn,
    error = old.report_error,
    info = old.report_info,
  }
end

function M.check()
  local h = reporter()
  h.start('pokeralph: Neovim')
  if vim.fn.has('nvim-0.7') == 1 then
    h.ok('Neovim ' .. tostring(vim.version().major) .. '.' .. tostring(vim.version().minor) .. ' (0.7 or newer)')
  else
    h.error('pokeralph needs Neovim 0.7 or newer')
  end

  h.start('pokeralph: socket')
  local path, source = paths.socket_path(config.options.socket)
  local how = ({ env = '$' .. paths.SOCKET_ENV, setup = "setup{ socket = ... }", default = 'the runtime dir' })[source]
  h.info(('socket: %s (from %s)'):format(path, how))
  local refused = paths.check_socket_file(path)
  if refused ~= nil then
    h.error(refused, { 'Remove it, or set XDG_RUNTIME_DIR (or POKERALPH_SOCKET) to a folder only you can write.' })
    return
  end
  if vim.loop.fs_lstat(path) == nil then
    h.error('no socket file: pokeralphd is not running', {
      'Start it with `pokeralphctl daemon start`, or `systemctl --user start pokeralphd`.',
    })
    return
  end
  h.ok('the socket file is yours and not a link')

  h.start('pokeralph: daemon')
  local err, status = client.request_sync('daemon.status', nil, 5000)
  if err ~= nil then
    h.error('pokeralphd does not answer: ' .. util.describe_error(err), {
      'Start it with `pokeralphctl daemon start`, or `systemctl --user start pokeralphd`.',
    })
    return
  end
  h.ok(('pokeralphd %s answers (pid %s, epoch %s, %d repositories)'):format(
    tostring(status.version),
    tostring(status.pid),
    tostring(status.epoch),
    #(status.repositories or {})
  ))
  local info = client.info()
  h.info(('connection: %s, last event seq %s, connected %d time(s)'):format(info.status, tostring(info.seq), info.connects))

  h.start('pokeralph: protocol')
  local derr, doc = client.request_sync('rpc.discover', nil, 5000)
  if derr ~= nil then
    h.error('rpc.discover failed: ' .. util.describe_error(derr))
  else
    local doc_info = util.val(doc.info) or {}
    h.ok(('protocol version %s (OpenRPC %s, %d methods)'):format(
      tostring(util.val(doc_info.version)),
      tostring(util.val(doc.openrpc)),
      #(doc.methods or {})
    ))
    local known = {}
    for _, method in ipairs(doc.methods or {}) do
      known[method.name] = true
    end
    local missing = {}
    for _, name in ipairs(M.METHODS) do
      if not known[name] then
        missing[#missing + 1] = name
      end
    end
    if #missing > 0 then
      h.error('this pokeralphd lacks methods the plugin uses: ' .. table.concat(missing, ', '), {
        'Upgrade pokeralph.',
      })
    else
      h.ok('every method the plugin uses is there')
    end
  end

  h.start('pokeralph: this repository')
  local path_here = repo.current(0)
  local rerr, summary = client.request_sync('repo.status', { repo = path_here }, 5000)
  if rerr ~= nil then
    h.warn(('%s: %s'):format(path_here, util.describe_error(rerr)), {
      'Register it with `pokeralphctl init` in that folder.',
    })
  else
    h.ok(('%s is registered as %s'):format(path_here, tostring(summary.name)))
  end
end

return M
