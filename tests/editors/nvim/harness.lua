-- The test harness of the Neovim scenarios: run under `nvim --headless -u NONE` with the
-- plugin root on 'runtimepath'. A scenario calls T.run(fn); what it found goes as JSON
-- to $PR_TEST_OUT (ok, error with traceback, every message the plugin showed, checks),
-- then Neovim quits. Waits poll with deadlines (vim.wait), never sleep.
local T = { messages = {}, checks = {}, selects = {}, inputs = {} }

T.dir = os.getenv('PR_TEST_DIR')
T.repo = os.getenv('PR_TEST_REPO')
T.task = os.getenv('PR_TEST_TASK')

vim.cmd('runtime plugin/pokeralph.lua')
require('pokeralph').setup({
  reconnect_min_ms = 50,
  reconnect_max_ms = 300,
  timeout_ms = 20000,
  notify = function(msg, level)
    table.insert(T.messages, { msg = msg, level = level })
  end,
})

-- vim.ui as a person answers it: each prompt takes the next scripted answer.
vim.ui.select = function(items, opts, on_choice)
  local answer = table.remove(T.selects, 1)
  if answer == nil then
    error('an unexpected vim.ui.select: ' .. tostring(opts.prompt))
  end
  local idx = answer(items, opts)
  on_choice(idx and items[idx] or nil, idx)
end
vim.ui.input = function(opts, on_confirm)
  local answer = table.remove(T.inputs, 1)
  if answer == nil then
    error('an unexpected vim.ui.input: ' .. tostring(opts.prompt))
  end
  on_confirm(answer(opts))
end

function T.wait(what, timeout_ms, cond)
  if not vim.wait(timeout_ms, cond, 20) then
    error('timed out after ' .. timeout_ms .. ' ms waiting for ' .. what, 2)
  end
end

function T.check(name, value)
  T.checks[name] = value
end

function T.text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

--- The messages so far that contain `text` (plain, not a pattern).
function T.said(pattern)
  local out = {}
  for _, m in ipairs(T.messages) do
    if m.msg:find(pattern, 1, true) then
      out[#out + 1] = m.msg
    end
  end
  return out
end

--- A marker file for the test process (it polls for it).
function T.mark(name, content)
  vim.fn.writefile({ content or '' }, T.dir .. '/' .. name)
end

--- Wait for the test process's marker file.
function T.await_mark(name, timeout_ms)
  T.wait('the marker ' .. name, timeout_ms, function()
    return vim.loop.fs_stat(T.dir .. '/' .. name) ~= nil
  end)
end

--- A request, waited for (fails the scenario on an error).
function T.call(method, params)
  local err, result = require('pokeralph.client').request_sync(method, params, 20000)
  if err ~= nil then
    error(method .. ' failed: ' .. vim.inspect(err), 2)
  end
  return result
end

--- A request on a connection of its own (not the plugin's), waited for.
function T.raw_call(method, params)
  local path = require('pokeralph.paths').socket_path()
  local pipe = vim.loop.new_pipe(false)
  local buf, reply = '', nil
  pipe:connect(path, function(err)
    assert(err == nil, err)
    pipe:read_start(function(_, data)
      buf = buf .. (data or '')
      local line = buf:match('^([^\n]*)\n')
      if line then
        reply = line
      end
    end)
    pipe:write(vim.json.encode({ jsonrpc = '2.0', id = 1, method = method, params = params }) .. '\n')
  end)
  T.wait('a reply to ' .. method, 10000, function()
    return reply ~= nil
  end)
  pipe:close()
  local message = vim.json.decode(reply)
  if message.error ~= nil then
    error(method .. ' failed: ' .. vim.inspect(message.error), 2)
  end
  return message.result
end

function T.run(fn)
  local ok, err = xpcall(fn, debug.traceback)
  local buffers = {}
  if not ok then -- what the scenario saw, to tell why
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      local name = vim.api.nvim_buf_get_name(buf)
      if name:find('pokeralph://', 1, true) then
        buffers[name] = T.text(buf)
      end
    end
  end
  local report = {
    ok = ok,
    error = ok and vim.NIL or tostring(err),
    messages = T.messages,
    checks = T.checks,
    buffers = next(buffers) and buffers or vim.empty_dict(),
  }
  local encoded = vim.json.encode(report)
  vim.fn.writefile({ encoded }, os.getenv('PR_TEST_OUT'))
  vim.cmd('qa!')
end

return T
