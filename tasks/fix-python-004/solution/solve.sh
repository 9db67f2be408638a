#!/bin/bash
sed -i 's/range(n, 1, -1)/range(n, 0, -1)/' /app/fox_countdown.py
