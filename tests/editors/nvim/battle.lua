-- A demo battle driven from the editor: list, follow, start (HITL), see output arrive,
-- approve with a note, answer the next approval and a `select` item through the inbox
-- prompts, a form answer the daemon refuses (asked again), the diff, :checkhealth.
local T = dofile(os.getenv('PR_TEST_DIR') .. '/harness.lua')
local client = require('pokeralph.client')
local statusline = require('pokeralph.statusline')

T.run(function()
  vim.cmd('cd ' .. vim.fn.fnameescape(T.repo))
  vim.cmd('edit ' .. vim.fn.fnameescape(T.repo .. '/textstats.py'))

  -- the statusline connects in the background and shows the figures
  T.check('statusline_before', statusline.component())
  T.wait('the statusline figures', 10000, function()
    return statusline.data() ~= nil
  end)
  T.check('statusline_idle', statusline.component())

  -- completion of subcommands and task ids
  T.check('complete_sub', vim.fn.getcompletion('Pokeralph fo', 'cmdline'))
  T.check('complete_task', require('pokeralph.commands').complete('0', 'Pokeralph start 0'))

  vim.cmd('Pokeralph tasks')
  T.wait('the task list', 10000, function()
    return #T.said(T.task) > 0
  end)

  vim.cmd('Pokeralph follow ' .. T.task)
  local follow
  T.wait('the follow buffer', 10000, function()
    follow = vim.fn.bufnr('pokeralph://follow/')
    return follow ~= -1 and T.text(follow):find('following') ~= nil
  end)
  vim.cmd('Pokeralph start ' .. T.task .. ' hitl')
  T.wait('output in the follow buffer', 30000, function()
    return T.text(follow):find('iteration 1') ~= nil and T.text(follow):find('waits for your approval') ~= nil
  end)
  T.check('follow_first', T.text(follow))
  T.wait('the statusline to show the approval waiting', 10000, function()
    local d = statusline.data()
    return d ~= nil and d.waiting >= 1 and d.awaiting == 1
  end)
  T.check('statusline_waiting', statusline.component())

  -- approve iteration 1 with a note (the command goes to the follow buffer's repository)
  vim.cmd('Pokeralph approve keep going')
  T.wait('the approval to be taken', 10000, function()
    return #T.said('iteration approved') > 0
  end)

  T.wait('the battle to complete', 30000, function()
    return T.text(follow):find('battle complete') ~= nil
  end)
  T.check('follow_done', T.text(follow))

  -- a select item, answered from its schema
  local created = T.call('inbox.create', {
    repo = T.repo,
    title = 'Which name?',
    mode = 'interactive',
    schema = { type = 'select', prompt = 'Pick a name', options = { 'alpha', 'beta', 'gamma' } },
  })
  local id = created.delivery.id
  table.insert(T.selects, function(items, opts)
    T.check('select_prompt', opts.prompt)
    return 2 -- beta
  end)
  local answered = nil
  require('pokeralph.inbox').answer(id, T.repo, function(ok)
    answered = ok
  end)
  T.wait('the select answer', 10000, function()
    return answered ~= nil
  end)
  T.check('select_answered', answered)
  T.check('select_item', T.call('inbox.get', { id = id, repo = T.repo }))

  -- a confirm item, picked from the open items and answered with its labels
  local confirm = T.call('inbox.create', {
    repo = T.repo,
    title = 'Ship it?',
    mode = 'blocking',
    schema = { type = 'confirm', prompt = 'Ship?', confirmLabel = 'Ship', cancelLabel = 'Wait' },
  })
  table.insert(T.selects, function(items)
    for i, item in ipairs(items) do
      if item.id == confirm.delivery.id then
        return i
      end
    end
  end)
  table.insert(T.selects, function(items)
    T.check('confirm_items', items)
    return 2 -- Wait
  end)
  vim.cmd('Pokeralph inbox')
  T.wait('the confirm answer', 10000, function()
    return #T.said('answered ' .. confirm.delivery.id) > 0
  end)
  T.check('confirm_item', T.call('inbox.get', { id = confirm.delivery.id, repo = T.repo }))

  -- a form: the daemon refuses a number that is not one, the prompts come again
  local form = T.call('inbox.create', {
    repo = T.repo,
    title = 'Details',
    mode = 'blocking',
    schema = {
      type = 'form',
      fields = {
        { name = 'count', type = 'number', label = 'How many', required = true },
        { name = 'why', type = 'text' },
      },
    },
  })
  table.insert(T.inputs, function()
    return 'many'
  end)
  table.insert(T.inputs, function()
    return ''
  end)
  table.insert(T.inputs, function()
    return '3'
  end)
  table.insert(T.inputs, function()
    return 'because'
  end)
  answered = nil
  require('pokeralph.inbox').answer(form.delivery.id, T.repo, function(ok)
    answered = ok
  end)
  T.wait('the form answer', 10000, function()
    return answered ~= nil
  end)
  T.check('form_answered', answered)
  T.check('form_item', T.call('inbox.get', { id = form.delivery.id, repo = T.repo }))

  -- the diff of iteration 1
  vim.cmd('Pokeralph diff ' .. T.task .. ' 1')
  local diff
  T.wait('the diff buffer', 10000, function()
    diff = vim.fn.bufnr('pokeralph://diff/' .. T.task .. '/1')
    return diff ~= -1 and T.text(diff):find('diff --git', 1, true) ~= nil
  end)
  T.check('diff_filetype', vim.api.nvim_buf_get_option(diff, 'filetype'))

  -- :checkhealth pokeralph
  vim.cmd('checkhealth pokeralph')
  T.check('health', T.text(0))
  T.check('client', { status = client.info().status, connects = client.info().connects })
end)
