#!/bin/bash
cd /app/happy-spruce && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Fix the amber drum' && git branch dev/falcon
