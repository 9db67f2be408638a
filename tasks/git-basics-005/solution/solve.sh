#!/bin/bash
cd /app/lucky-swan && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Print the eager fig' && git branch fix/prism
