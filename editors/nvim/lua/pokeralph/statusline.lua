-- A statusline component: battles running across every repository, items waiting on
-- you (open inbox items: approvals, questions), and today's cost. It never waits: the
-- component returns the last figures, which are refreshed in the background when the
-- connection comes up and shortly after an event that may change them.
local client = require('pokeralph.client')
local config = require('pokeralph.config')
local util = require('pokeralph.util')

local M = {}

-- Events that cannot change the figures (they come often: output, progress).
local QUIET = {
  iteration_output = true,
  planning_output = true,
  progress_update = true,
  debug = true,
}

-- What counts as running (awaiting_approval is counted apart: it waits on you).
local ACTIVE = { running = true, queued = true }

local S = {
  started = false,
  timer = nil,
  refreshing = false,
  again = false,
  data = nil, -- {running, waiting, awaiting, cost, battles}
  refreshes = 0,
}

local function redraw()
  pcall(vim.cmd, 'redrawstatus!')
end

local function refresh()
  if S.refreshing then
    S.again = true
    return
  end
  S.refreshing = true
  local results, left = {}, 3
  local function done()
    left = left - 1
    if left > 0 then
      return
    end
    S.refreshing = false
    if results.battles ~= nil and results.inbox ~= nil and results.status ~= nil then
      local running, awaiting = 0, 0
      for _, battle in ipairs(results.battles) do
        local status = util.val(battle.status)
        if ACTIVE[status] then
          running = running + 1
        end
        if status == 'awaiting_approval' then
          awaiting = awaiting + 1
        end
      end
      local spend = util.val(results.status.spendToday)
      S.data = {
        running = running,
        awaiting = awaiting,
        waiting = #results.inbox,
        cost = spend and util.val(spend.costUsd) or 0,
        battles = results.battles,
      }
      S.refreshes = S.refreshes + 1
      redraw()
    end
    if S.again then
      S.again = false
      refresh()
    end
  end
  -- background requests: a failure leaves the last figures (the client said it once)
  client.request('battle.current', nil, function(err, result)
    results.battles = err == nil and result.battles or nil
    done()
  end)
  client.request('inbox.list', { status = 'open' }, function(err, result)
    results.inbox = err == nil and result.items or nil
    done()
  end)
  client.request('daemon.status', nil, function(err, result)
    results.status = err == nil and result or nil
    done()
  end)
end

local function schedule_refresh()
  if S.timer == nil then
    S.timer = vim.loop.new_timer()
  end
  S.timer:stop()
  S.timer:start(config.options.statusline_debounce_ms, 0, function()
    vim.schedule(refresh)
  end)
end

function M.start()
  if S.started then
    return
  end
  S.started = true
  client.on_state(function(status)
    if status == 'up' then
      refresh()
    else
      redraw()
    end
  end)
  client.on_event(function(event)
    if not QUIET[event.type] then
      schedule_refresh()
    end
  end)
  client.start()
  if client.info().status == 'up' then
    refresh()
  end
end

--- The figures (nil until the first refresh): running, awaiting (approval), waiting
--- (open inbox items), cost (USD today), battles (battle.current's list).
function M.data()
  return S.data
end

--- How many refreshes completed (for tests and for components that cache).
function M.refreshes()
  return S.refreshes
end

--- The component's text, e.g. `PR 1 running | 2 waiting | $0.42`; while no daemon
--- answers, `PR off`.
function M.component()
  M.start()
  if client.info().status ~= 'up' then
    return 'PR off'
  end
  local d = S.data
  if d == nil then
    return 'PR …'
  end
  return ('PR %d running | %d waiting | $%.2f'):format(d.running, d.waiting, d.cost)
end

return M
