-- `:Pokeralph SUBCOMMAND ...`: every subcommand is one or two asynchronous requests;
-- the answer comes back as a message or a buffer, never while the editor waits.
-- The repository is the current buffer's (see pokeralph.repo).
local client = require('pokeralph.client')
local inbox = require('pokeralph.inbox')
local repo = require('pokeralph.repo')
local util = require('pokeralph.util')
local views = require('pokeralph.views')

local M = {}

local function report(ok_message)
  return function(err, result)
    if err ~= nil then
      return util.error(util.describe_error(err))
    end
    util.notify(type(ok_message) == 'function' and ok_message(result) or ok_message)
  end
end

local function note_of(args)
  local note = table.concat(args, ' ')
  return note ~= '' and note or nil
end

local cache = { tasks = {}, inbox = {} } -- for completion: per repository

local function refresh_tasks(path, cb)
  client.request('task.list', { repo = path }, function(err, result)
    if err == nil then
      local ids = {}
      for _, task in ipairs(result.tasks or {}) do
        ids[#ids + 1] = task.id
      end
      cache.tasks[path] = ids
    end
    if cb then
      cb(err, result)
    end
  end)
end

M.subcommands = {}
local S = M.subcommands

S.tasks = {
  help = 'list the repository\'s tasks',
  run = function(path)
    refresh_tasks(path, function(err, result)
      if err ~= nil then
        return util.error(util.describe_error(err))
      end
      local lines = {}
      for _, task in ipairs(result.tasks or {}) do
        lines[#lines + 1] = util.clean(('%-10s %s  %s'):format(task.status or '?', task.id, task.title))
      end
      util.notify(#lines > 0 and ('tasks:\n' .. table.concat(lines, '\n')) or 'no tasks (plan some with `pokeralphctl plan`)')
    end)
  end,
}

S.status = {
  help = 'active battles across every repository',
  run = function()
    client.request('battle.current', nil, function(err, result)
      if err ~= nil then
        return util.error(util.describe_error(err))
      end
      local lines = {}
      for _, b in ipairs(result.battles or {}) do
        lines[#lines + 1] = util.clean(
          ('%-14s %-30s %-18s iteration %s  $%.2f'):format(b.repo, b.taskId, b.status, tostring(b.iteration), tonumber(b.costUsd) or 0)
        )
      end
      util.notify(#lines > 0 and ('battles:\n' .. table.concat(lines, '\n')) or 'no battle is active')
    end)
  end,
}

S.start = {
  help = 'start a battle: start TASK [hitl|yolo]',
  complete = 'task',
  run = function(path, args)
    local task, mode = args[1], args[2]
    if task == nil then
      return util.error('start needs a task id (:Pokeralph tasks lists them)')
    end
    client.request('battle.start', { repo = path, taskId = task, mode = mode }, report(function(result)
      local battle = result.battle or {}
      return ('battle for %s started (%s%s); :Pokeralph follow to watch it'):format(
        task,
        tostring(util.val(battle.mode) or mode or 'default mode'),
        util.val(result.queued) and ', queued' or ''
      )
    end))
  end,
}

S.pause = {
  help = 'pause at the end of the iteration (pause now: stop the agent at once)',
  run = function(path, args)
    client.request('battle.pause', { repo = path, now = args[1] == 'now' or nil }, report('battle pausing'))
  end,
}

S.resume = {
  help = 'resume the paused battle',
  run = function(path)
    client.request('battle.resume', { repo = path }, report('battle resumed'))
  end,
}

S.cancel = {
  help = 'cancel the battle (its agent is ended)',
  run = function(path)
    client.request('battle.cancel', { repo = path }, report('battle cancelled'))
  end,
}

S.approve = {
  help = 'approve the iteration awaiting approval: approve [note]',
  run = function(path, args)
    client.request('battle.approve', { repo = path, approve = true, note = note_of(args) }, report('iteration approved'))
  end,
}

S.reject = {
  help = 'reject the iteration awaiting approval: reject [note] (the note goes to the next iteration)',
  run = function(path, args)
    client.request('battle.approve', { repo = path, approve = false, note = note_of(args) }, report('iteration rejected'))
  end,
}

S.inbox = {
  help = 'pick an open inbox item (any repository) and answer it',
  run = function()
    inbox.pick()
  end,
}

S.answer = {
  help = 'answer one inbox item: answer ID',
  complete = 'inbox',
  run = function(path, args)
    if args[1] == nil then
      return inbox.pick()
    end
    inbox.answer(args[1], path)
  end,
}

S.follow = {
  help = 'follow a battle\'s live output: follow [TASK]',
  complete = 'task',
  run = function(path, args)
    views.follow(path, args[1])
  end,
}

S.diff = {
  help = 'an iteration\'s diff: diff [TASK] [ITERATION]',
  complete = 'task',
  run = function(path, args)
    local task, iteration = args[1], args[2]
    if task ~= nil and tonumber(task) ~= nil and iteration == nil then
      task, iteration = nil, task -- `diff 2`: iteration 2 of the active battle
    end
    views.diff(path, task, iteration and tonumber(iteration) or nil)
  end,
}

S.health = {
  help = 'run :checkhealth pokeralph',
  run = function()
    vim.cmd('checkhealth pokeralph')
  end,
}

--- Run `:Pokeralph` with its words.
function M.run(fargs)
  local name = fargs[1]
  local sub = name and S[name]
  if sub == nil then
    local names = vim.tbl_keys(S)
    table.sort(names)
    return util.error(
      (name and ('unknown subcommand ' .. name .. '; ') or '') .. 'subcommands: ' .. table.concat(names, ', ')
    )
  end
  sub.run(repo.current(0), { unpack(fargs, 2) })
end

-- Completion must answer at once: it uses what the last listing cached and refreshes it
-- in the background (the first time for a repository it waits at most 200 ms).
local function cached(kind, path)
  if kind == 'task' then
    if cache.tasks[path] == nil then
      local done = false
      refresh_tasks(path, function()
        done = true
      end)
      vim.wait(200, function()
        return done
      end, 10)
    else
      refresh_tasks(path)
    end
    return cache.tasks[path] or {}
  end
  client.request('inbox.list', { status = 'open' }, function(err, result)
    if err == nil then
      local ids = {}
      for _, item in ipairs(result.items or {}) do
        ids[#ids + 1] = item.id
      end
      cache.inbox = ids
    end
  end)
  return cache.inbox
end

function M.complete(arglead, cmdline)
  local words = vim.split(cmdline:sub(1, #cmdline - #arglead), '%s+', { trimempty = true })
  local matches = {}
  local candidates
  if #words <= 1 then
    candidates = vim.tbl_keys(S)
    table.sort(candidates)
  elseif #words == 2 and S[words[2]] and S[words[2]].complete then
    candidates = cached(S[words[2]].complete, repo.current(0))
  elseif #words == 3 and words[2] == 'start' then
    candidates = { 'hitl', 'yolo' }
  elseif #words == 2 and words[2] == 'pause' then
    candidates = { 'now' }
  else
    candidates = {}
  end
  for _, c in ipairs(candidates) do
    if c:sub(1, #arglead) == arglead then
      matches[#matches + 1] = c
    end
  end
  return matches
end

return M
