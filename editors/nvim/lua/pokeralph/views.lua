-- Buffers that show a battle: its live output (follow) and an iteration's diff.
--
-- A follow buffer is fed by the client's events (one subscription for everything;
-- this module keeps the events of its repository and task). Lines are gathered and
-- written at most every 50 ms, the buffer keeps at most follow_max_lines (the oldest
-- go), and a window whose cursor was on the last line follows the new ones.
local client = require('pokeralph.client')
local config = require('pokeralph.config')
local util = require('pokeralph.util')

local M = {}

local FLUSH_MS = 50
local follows = {} -- buf -> follow state

local function flush(state)
  state.scheduled = false
  local buf = state.buf
  if not vim.api.nvim_buf_is_valid(buf) or #state.lines == 0 then
    state.lines = {}
    return
  end
  local lines = state.lines
  state.lines = {}
  local count = vim.api.nvim_buf_line_count(buf)
  local at_end = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    at_end[win] = vim.api.nvim_win_get_cursor(win)[1] >= count
  end
  vim.api.nvim_buf_set_option(buf, 'modifiable', true)
  vim.api.nvim_buf_set_lines(buf, -1, -1, false, lines)
  local max = config.options.follow_max_lines
  local total = vim.api.nvim_buf_line_count(buf)
  if total > max then
    vim.api.nvim_buf_set_lines(buf, 0, total - max, false, {})
    total = max
  end
  vim.api.nvim_buf_set_option(buf, 'modifiable', false)
  for win, follow in pairs(at_end) do
    if follow and vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_set_cursor(win, { total, 0 })
    end
  end
end

local function append(state, lines)
  local max = config.options.follow_max_lines
  for _, line in ipairs(lines) do
    state.lines[#state.lines + 1] = line
  end
  if #state.lines > max then -- the buffer would drop them anyway
    state.lines = { unpack(state.lines, #state.lines - max + 1) }
  end
  if not state.scheduled then
    state.scheduled = true
    vim.defer_fn(function()
      flush(state)
    end, FLUSH_MS)
  end
end

local TERMINAL = {
  battle_complete = 'battle complete',
  battle_failed = 'battle failed',
  battle_cancelled = 'battle cancelled',
  battle_escalated = 'battle escalated: it waits for you (:Pokeralph inbox)',
  battle_paused = 'battle paused (:Pokeralph resume)',
  battle_resumed = 'battle resumed',
  battle_blocked = 'battle blocked',
  battle_merged = 'battle merged',
}

--- The lines an event adds to a follow buffer.
function M.render(event)
  local kind = event.type
  local payload = util.val(event.payload) or {}
  local lines = {}
  if kind == 'iteration_output' then
    local phase = util.val(payload.phase)
    local prefix = phase and ('[' .. phase .. '] ') or ''
    for _, chunk in ipairs(util.val(payload.chunks) or {}) do
      local text = util.val(chunk.text) or ''
      if chunk.kind == 'text' then
        for _, line in ipairs(util.lines(text)) do
          lines[#lines + 1] = prefix .. line
        end
      elseif chunk.kind == 'tool_use' then
        lines[#lines + 1] = prefix .. '→ ' .. (util.lines(text)[1] or '')
      elseif chunk.kind == 'stderr' or chunk.kind == 'tool_error' or chunk.kind == 'notice' then
        for _, line in ipairs(util.lines(text)) do
          lines[#lines + 1] = prefix .. '! ' .. line
        end
      end
    end
  elseif kind == 'iteration_start' then
    lines[#lines + 1] = ('── iteration %s ──'):format(tostring(util.val(payload.iteration) or '?'))
  elseif kind == 'iteration_end' then
    lines[#lines + 1] = ('── iteration %s: %s ──'):format(
      tostring(util.val(payload.iteration) or '?'),
      util.clean(tostring(util.val(payload.result) or 'done'))
    )
  elseif kind == 'await_approval' then
    lines[#lines + 1] = ('── iteration %s waits for your approval: :Pokeralph approve [note] or :Pokeralph reject [note] ──'):format(
      tostring(util.val(payload.iteration) or '?')
    )
  elseif kind == 'phase_changed' then
    lines[#lines + 1] = '── phase: ' .. util.clean(tostring(util.val(payload.phase) or '?')) .. ' ──'
  elseif TERMINAL[kind] then
    lines[#lines + 1] = '── ' .. TERMINAL[kind] .. ' ──'
  end
  return lines
end

local function task_of(event)
  local task = util.val(event.taskId)
  if task == nil and type(event.payload) == 'table' then
    task = util.val(event.payload.taskId)
  end
  return task
end

-- The repository's name (events name it) and path, then `cb(name, path)`.
local function resolve_repo(repo, cb)
  client.request('repo.status', { repo = repo }, function(err, result)
    if err ~= nil then
      return util.error(util.describe_error(err))
    end
    cb(result.name, result.path)
  end)
end

-- `task`, else the repository's active battle's task, then `cb(task)`.
local function task_or_active(repo, task, cb)
  if task ~= nil and task ~= '' then
    return cb(task)
  end
  client.request('battle.current', { repo = repo }, function(err, result)
    if err ~= nil then
      return util.error(util.describe_error(err))
    end
    local battle = (result.battles or {})[1]
    if battle == nil then
      return util.error('no battle is active in this repository: name a task')
    end
    cb(battle.taskId)
  end)
end

--- Follow `task` (default: the active battle) of `repo` in a scratch buffer.
function M.follow(repo, task, done)
  done = done or function() end
  task_or_active(repo, task, function(task_id)
    resolve_repo(repo, function(name, path)
      local bufname = ('pokeralph://follow/%s/%s'):format(name, task_id)
      local buf = util.scratch(bufname, 'pokeralph')
      vim.api.nvim_buf_set_var(buf, 'pokeralph_repo', path)
      vim.api.nvim_buf_set_var(buf, 'pokeralph_task', task_id)
      if follows[buf] == nil then
        local state = { buf = buf, lines = {}, scheduled = false }
        follows[buf] = state
        util.set_lines(buf, { ('pokeralph: following %s in %s (live)'):format(task_id, name) })
        state.listener = client.on_event(function(event)
          if event.repo == name and task_of(event) == task_id then
            append(state, M.render(event))
          end
        end)
        state.state_listener = client.on_state(function(status, info)
          if status == 'up' and info.restarted then
            append(state, { '── ' .. client.RESTARTED .. ' ──' })
          elseif status == 'down' and not state.down then
            append(state, { '── disconnected from pokeralphd; reconnecting ──' })
          end
          state.down = status ~= 'up'
        end)
        vim.api.nvim_buf_attach(buf, false, {
          on_detach = function()
            client.off(state.listener)
            client.off(state.state_listener)
            follows[buf] = nil
          end,
        })
      end
      done(buf)
    end)
  end)
end

--- Open the diff of `task`'s iteration (default: the latest) in a buffer.
function M.diff(repo, task, iteration, done)
  done = done or function() end
  task_or_active(repo, task, function(task_id)
    client.request('battle.diff', { repo = repo, taskId = task_id, iteration = iteration }, function(err, result)
      if err ~= nil then
        util.error(util.describe_error(err))
        return done(nil)
      end
      local buf = util.scratch(('pokeralph://diff/%s/%d'):format(task_id, result.iteration), 'diff')
      vim.api.nvim_buf_set_var(buf, 'pokeralph_repo', repo)
      local lines = util.lines(result.diff)
      if result.truncated then
        lines[#lines + 1] = '[truncated: the diff is larger than shown]'
      end
      util.set_lines(buf, lines)
      done(buf)
    end)
  end)
end

--- The follow states (for tests and :checkhealth).
function M.follows()
  return follows
end

return M
