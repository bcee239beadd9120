-- Reconnecting: a dropped connection resumes with `since` (the events published
-- meanwhile are replayed, none twice); a dead daemon is one message, however many
-- retries; a restarted daemon (another epoch) is found again, said once, and its events
-- reach the follow buffer.
local T = dofile(os.getenv('PR_TEST_DIR') .. '/harness.lua')
local client = require('pokeralph.client')

local states, deliveries = {}, {}
client.on_state(function(status, info)
  table.insert(states, { status = status, info = info })
end)
client.on_event(function(event)
  if event.type == 'new_delivery' then
    table.insert(deliveries, event.payload.id or event.payload.deliveryId or event.seq)
  end
end)

local function up()
  return client.info().status == 'up'
end

T.run(function()
  vim.cmd('cd ' .. vim.fn.fnameescape(T.repo))
  local first = T.call('daemon.status')
  vim.cmd('Pokeralph follow ' .. T.task)
  local follow
  T.wait('the follow buffer', 10000, function()
    follow = vim.fn.bufnr('pokeralph://follow/')
    return follow ~= -1
  end)

  -- 1. the same daemon: stop, miss an event, come back with `since`
  client.stop()
  local missed = T.raw_call('inbox.create', { repo = T.repo, title = 'While away', mode = 'passive' })
  client.start()
  T.wait('the connection to come back', 10000, up)
  T.wait('the missed event to be replayed', 10000, function()
    return #deliveries >= 1
  end)
  T.check('resumed', {
    epoch_same = client.info().epoch == first.epoch,
    replayed = states[#states].info.replayed,
    deliveries = #deliveries,
    missed = missed.delivery.id,
  })

  -- 2. the daemon dies: one message, however many retries
  T.mark('ready')
  T.await_mark('killed', 30000)
  T.wait('the client to notice', 10000, function()
    return not up()
  end)
  local attempts = client.info().attempts
  T.wait('several retries', 10000, function()
    return client.info().attempts >= attempts + 3
  end)
  vim.cmd('Pokeralph tasks') -- a person asks meanwhile: one error for the one command
  T.wait('the command to fail', 10000, function()
    return #T.said('is not running') > 0
  end)
  T.check('while_down', { messages = vim.deepcopy(T.messages), attempts = client.info().attempts - attempts })
  T.check('statusline_down', require('pokeralph').statusline())
  T.mark('down-checked')

  -- 3. a new daemon: found again, the restart said once, its events followed
  T.await_mark('restarted', 30000)
  T.wait('the connection to the new daemon', 15000, function()
    return up() and client.info().epoch ~= first.epoch
  end)
  vim.api.nvim_set_current_buf(follow)
  vim.cmd('Pokeralph start ' .. T.task .. ' hitl')
  T.wait('output of the new daemon in the follow buffer', 30000, function()
    return T.text(follow):find('waits for your approval', 1, true) ~= nil
  end)
  T.check('follow', T.text(follow))
  T.check('after', { status = client.info().status, connects = client.info().connects })
end)
