#!/bin/bash
cd /app/lucky-otter && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Fetch the snowy hazel' && git branch fix/yarrow
