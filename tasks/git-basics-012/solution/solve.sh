#!/bin/bash
cd /app/noble-nectar && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Check the warm melon' && git branch fix/lotus
