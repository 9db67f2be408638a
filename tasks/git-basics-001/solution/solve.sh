#!/bin/bash
cd /app/mellow-comet && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Copy the crimson magnet' && git branch dev/comet
