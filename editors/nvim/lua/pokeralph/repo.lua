-- Which repository a command means: the one of the current buffer (its file's folder,
-- walked up to the folder holding `.git`, a folder or a worktree's file), else of the
-- working directory. A pokeralph scratch buffer remembers the repository it shows. The
-- daemon is sent the absolute path and resolves it (a path inside a registered
-- repository names it), as pokeralphctl sends its working directory.
local uv = vim.loop

local M = {}

--- The git top level above `dir` (or `dir` itself when there is none).
function M.toplevel(dir)
  local d = dir
  while d ~= nil and d ~= '' do
    if uv.fs_stat(d .. '/.git') ~= nil then
      return d
    end
    local parent = vim.fn.fnamemodify(d, ':h')
    if parent == d then
      break
    end
    d = parent
  end
  return dir
end

--- The repository of buffer `buf` (0: the current one), as an absolute path.
function M.current(buf)
  buf = buf or 0
  local ok, remembered = pcall(vim.api.nvim_buf_get_var, buf, 'pokeralph_repo')
  if ok and type(remembered) == 'string' and remembered ~= '' then
    return remembered
  end
  local name = vim.api.nvim_buf_get_name(buf)
  local dir
  if name ~= '' and not name:match('^%a[%w+.-]*://') and vim.api.nvim_buf_get_option(buf, 'buftype') == '' then
    dir = vim.fn.fnamemodify(name, ':p:h')
  end
  if dir == nil or uv.fs_stat(dir) == nil then
    dir = vim.fn.getcwd()
  end
  return M.toplevel(dir)
end

return M
