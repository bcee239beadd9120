-- Small helpers shared by the modules: messages, nulls, scratch buffers.
local M = {}

--- The value, or nil for JSON null (vim.json.decode gives vim.NIL).
function M.val(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

--- One message to the person, through the configured notify (vim.notify by default).
function M.notify(msg, level)
  local config = require('pokeralph.config')
  config.options.notify('pokeralph: ' .. msg, level or vim.log.levels.INFO)
end

function M.error(msg)
  M.notify(msg, vim.log.levels.ERROR)
end

function M.warn(msg)
  M.notify(msg, vim.log.levels.WARN)
end

--- An error from the client (a JSON-RPC error object, or a disconnect) in one line.
function M.describe_error(err)
  if type(err) ~= 'table' then
    return tostring(err)
  end
  local text = tostring(err.message or 'error')
  local data = M.val(err.data)
  if type(data) == 'table' and M.val(data.field) ~= nil then
    text = text .. ' (' .. tostring(data.field) .. ')'
  end
  if err.code ~= nil then
    text = text .. ' [' .. tostring(err.code) .. ']'
  end
  return text
end

--- Control characters out of text from the daemon (an agent's output, a title): a
--- buffer line cannot hold a newline, and escapes must not reach the terminal.
function M.clean(text)
  return (tostring(text):gsub('[%z\1-\8\11-\31\127]', '?'))
end

--- A scratch buffer named `name` (reused if it exists), shown in a split unless it is
--- already in a window of this tab; returns its number.
function M.scratch(name, filetype)
  local buf = vim.fn.bufnr('^' .. vim.fn.escape(name, '\\/.*$^~[]') .. '$')
  if buf == -1 then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.api.nvim_buf_set_option(buf, 'buftype', 'nofile')
    vim.api.nvim_buf_set_option(buf, 'bufhidden', 'hide')
    vim.api.nvim_buf_set_option(buf, 'swapfile', false)
    if filetype then
      vim.api.nvim_buf_set_option(buf, 'filetype', filetype)
    end
  end
  if vim.fn.bufwinid(buf) == -1 then
    vim.cmd('split')
    vim.api.nvim_win_set_buf(0, buf)
  end
  return buf
end

--- Replace a buffer's lines (modifiable for the time of it).
function M.set_lines(buf, lines)
  vim.api.nvim_buf_set_option(buf, 'modifiable', true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.api.nvim_buf_set_option(buf, 'modifiable', false)
end

--- Text split into buffer lines (control characters cleaned).
function M.lines(text)
  local out = {}
  for line in (tostring(text) .. '\n'):gmatch('(.-)\r?\n') do
    out[#out + 1] = M.clean(line)
  end
  if #out > 0 and out[#out] == '' then
    out[#out] = nil
  end
  return out
end

return M
