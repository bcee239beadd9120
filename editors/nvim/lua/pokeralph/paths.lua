-- Where the daemon's socket is: computed as pokeralph_core/paths.py does, so the editor,
-- the CLI and the daemon meet on the same path. Order: $POKERALPH_SOCKET, then an
-- explicit path (setup{socket=...}), then pokeralph/pokeralphd.sock under the user's
-- runtime dir: $XDG_RUNTIME_DIR when it is a private directory we own, else
-- /run/user/UID under the same check, else ~/Library/Caches/TemporaryItems on macOS,
-- else pokeralph-runtime-UID in the temp dir.
--
-- The socket file is never trusted blindly (as pokeralphctl.client): a link, or a file
-- of another user, is refused before a byte is sent.
local uv = vim.loop
local bit = require('bit')

local M = {}

M.SOCKET_ENV = 'POKERALPH_SOCKET'

local function env(name)
  local value = os.getenv(name)
  if value == nil then
    return ''
  end
  return vim.trim(value)
end

local function join(...)
  return table.concat({ ... }, '/')
end

--- Whether `path` is a directory of ours that nobody else may read or write.
function M.private_dir(path)
  local info = uv.fs_lstat(path)
  return info ~= nil
    and info.type == 'directory'
    and info.uid == uv.getuid()
    and bit.band(info.mode, 63) == 0 -- mode & 0o077
end

local function is_darwin()
  local uname = uv.os_uname()
  return uname ~= nil and uname.sysname == 'Darwin'
end

-- Python's tempfile.gettempdir(): $TMPDIR, $TEMP, $TMP (the first that is a folder),
-- else /tmp.
local function temp_dir()
  for _, name in ipairs({ 'TMPDIR', 'TEMP', 'TMP' }) do
    local value = env(name)
    if value ~= '' then
      local info = uv.fs_stat(value)
      if info ~= nil and info.type == 'directory' then
        return (value:gsub('/+$', ''))
      end
    end
  end
  return '/tmp'
end

--- The user's runtime dir (not created here).
function M.runtime_dir()
  local xdg = env('XDG_RUNTIME_DIR')
  if xdg ~= '' and xdg:sub(1, 1) == '/' and M.private_dir(xdg) then
    return xdg
  end
  if is_darwin() then
    local home = os.getenv('HOME') or vim.fn.expand('~')
    return join(home, 'Library', 'Caches', 'TemporaryItems')
  end
  local run_user = '/run/user/' .. uv.getuid()
  if M.private_dir(run_user) then
    return run_user
  end
  return join(temp_dir(), 'pokeralph-runtime-' .. uv.getuid())
end

--- The socket to use, and where that came from ('env', 'setup' or 'default').
function M.socket_path(explicit)
  local from_env = env(M.SOCKET_ENV)
  if from_env ~= '' then
    return from_env, 'env'
  end
  if explicit ~= nil and explicit ~= '' then
    return vim.fn.expand(explicit), 'setup'
  end
  return join(M.runtime_dir(), 'pokeralph', 'pokeralphd.sock'), 'default'
end

--- nil when the socket file may be used, else why not (a link, another user's file).
--- A missing file is not refused here: connecting says so in its own words.
function M.check_socket_file(path)
  if path:sub(1, 1) == '\0' then
    return nil -- an abstract socket has no file
  end
  local info = uv.fs_lstat(path)
  if info == nil then
    return nil
  end
  if info.type == 'link' then
    return 'refusing to talk to ' .. path .. ': it is a symbolic link'
  end
  if info.uid ~= uv.getuid() then
    return ('refusing to talk to %s: it belongs to uid %d, not to you'):format(path, info.uid)
  end
  return nil
end

return M
