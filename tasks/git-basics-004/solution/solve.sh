#!/bin/bash
cd /app/clever-tulip && git init -q && git add -A && git -c user.name=dev -c user.email=dev@example.com commit -qm 'Push the windy kiwi' && git branch feature/zebra
