#!/bin/bash
cd /app && tar czf /app/steady-river.tar.gz reef/*.ini
